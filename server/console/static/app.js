// Keel console: confirmation dialogs for forms marked data-confirm. The
// operator's reason goes into the form's hidden "reason" field (audited).
(function () {
  "use strict";
  var dialog = document.getElementById("confirm");
  var pending = null;
  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    if (!form.dataset || !form.dataset.confirm || form.dataset.confirmed === "1") {
      return;
    }
    ev.preventDefault();
    pending = form;
    document.getElementById("confirm-text").textContent = form.dataset.confirm;
    var input = document.getElementById("confirm-reason");
    var hint = document.getElementById("confirm-hint");
    var min = parseInt(form.dataset.minReason || "0", 10) || 0;
    // A form with its own reason field (data-no-reason) is confirmed
    // without asking for the reason a second time.
    var label = input.closest("label");
    if (label) {
      label.hidden = form.dataset.noReason === "1";
    }
    if (form.dataset.noReason === "1") {
      min = 0;
    }
    input.value = "";
    input.required = min > 0;
    if (min > 0) {
      input.setAttribute("minlength", String(min));
    } else {
      input.removeAttribute("minlength");
    }
    if (hint) {
      hint.hidden = min === 0;
      hint.textContent = min > 0 ? hint.dataset.text || "" : "";
    }
    dialog.showModal();
  });
  if (dialog) {
    dialog.addEventListener("close", function () {
      var input = document.getElementById("confirm-reason");
      var min = pending && pending.dataset.noReason !== "1" ? parseInt(pending.dataset.minReason || "0", 10) || 0 : 0;
      if (dialog.returnValue === "ok" && pending && input.value.trim().length < min) {
        dialog.returnValue = "";
        dialog.showModal();
        return;
      }
      if (dialog.returnValue === "ok" && pending) {
        var reason = pending.querySelector("input[name=reason]");
        if (reason && pending.dataset.noReason !== "1") {
          reason.value = document.getElementById("confirm-reason").value;
        }
        pending.dataset.confirmed = "1";
        pending.submit();
      }
      pending = null;
    });
  }
})();

// The menu button (narrow windows): shows the side bar of every system's
// pages over the page, and hides it again.
(function () {
  "use strict";
  var btn = document.getElementById("menu");
  var top = document.getElementById("top");
  if (!btn || !top) {
    return;
  }
  btn.addEventListener("click", function () {
    var open = top.classList.toggle("open");
    btn.setAttribute("aria-expanded", open ? "true" : "false");
  });
})();

// Date fields (inputs with data-date, from the module kit's DateInput):
// Chromium draws <input type=date> in its own UI language, whatever the
// page's lang, so the console's date fields are text inputs with a
// calendar of their own in the page's language. The field takes
// YYYY-MM-DD (data-date="date") or YYYY-MM-DD HH:MM ("datetime"), typed or
// picked; a malformed value is refused before the form is sent, in words.
(function () {
  "use strict";
  var en = (document.documentElement.lang || "").indexOf("en") === 0;
  var W = en ? {
    open: "Open the calendar", prev: "Previous month", next: "Next month", today: "Today", clear: "Clear",
    title: function (y, m) { return ["January", "February", "March", "April", "May", "June", "July", "August",
      "September", "October", "November", "December"][m] + " " + y; },
    days: ["Mo", "Tu", "We", "Th", "Fr", "Sa", "Su"],
    bad: { date: "Enter a date as yyyy-mm-dd, e.g. 2026-07-14.", datetime: "Enter a date and time as yyyy-mm-dd hh:mm, e.g. 2026-07-14 09:30." }
  } : {
    open: "打开日历", prev: "上个月", next: "下个月", today: "今天", clear: "清除",
    title: function (y, m) { return y + "年" + (m + 1) + "月"; },
    days: ["一", "二", "三", "四", "五", "六", "日"],
    bad: { date: "请按 年-月-日 输入日期，例如 2026-07-14。", datetime: "请按 年-月-日 时:分 输入，例如 2026-07-14 09:30。" }
  };
  var shape = { date: /^(\d{4})-(\d{2})-(\d{2})$/, datetime: /^(\d{4})-(\d{2})-(\d{2}) ([01]\d|2[0-3]):([0-5]\d)$/ };
  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function iso(d) { return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()); }
  // parse reads the field's day, or null: a real calendar day only.
  function parse(v) {
    var m = /^(\d{4})-(\d{2})-(\d{2})/.exec(v || "");
    if (!m) { return null; }
    var d = new Date(+m[1], +m[2] - 1, +m[3]);
    return d.getMonth() === +m[2] - 1 ? d : null;
  }
  function check(input) {
    var v = input.value.trim();
    var ok = v === "" || (shape[input.dataset.date] || shape.date).test(v) && parse(v) !== null;
    input.setCustomValidity(ok ? "" : W.bad[input.dataset.date] || W.bad.date);
  }
  var open = null;
  function close() {
    if (open) { open.pop.remove(); open.btn.setAttribute("aria-expanded", "false"); open = null; }
  }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined) { e.textContent = text; }
    return e;
  }
  function button(cls, text, label, onClick) {
    var b = el("button", cls, text);
    b.type = "button";
    if (label) { b.setAttribute("aria-label", label); b.title = label; }
    b.addEventListener("click", function (ev) { ev.stopPropagation(); onClick(); });
    return b;
  }
  function pick(input, day) {
    var v = day ? iso(day) : "";
    if (day && input.dataset.date === "datetime") {
      var t = / (\d{2}:\d{2})$/.exec(input.value);
      v += " " + (t ? t[1] : "00:00");
    }
    input.value = v;
    check(input);
    input.dispatchEvent(new Event("input", { bubbles: true }));
    input.dispatchEvent(new Event("change", { bubbles: true }));
    close();
    input.focus();
  }
  function draw(state) {
    var pop = state.pop, input = state.input, y = state.month.getFullYear(), m = state.month.getMonth();
    pop.textContent = "";
    var head = el("div", "date-head");
    head.appendChild(button("secondary date-prev", "‹", W.prev, function () { state.month = new Date(y, m - 1, 1); draw(state); }));
    head.appendChild(el("span", "date-title", W.title(y, m)));
    head.appendChild(button("secondary date-next", "›", W.next, function () { state.month = new Date(y, m + 1, 1); draw(state); }));
    pop.appendChild(head);
    var grid = el("div", "date-grid");
    W.days.forEach(function (d) { grid.appendChild(el("span", "date-wd", d)); });
    var first = (new Date(y, m, 1).getDay() + 6) % 7;
    for (var i = 0; i < first; i++) { grid.appendChild(el("span")); }
    var chosen = parse(input.value), today = iso(new Date());
    for (var d = 1; d <= new Date(y, m + 1, 0).getDate(); d++) {
      (function (day) {
        var b = button("date-day", String(day.getDate()), null, function () { pick(input, day); });
        b.dataset.day = iso(day);
        if (chosen && iso(chosen) === b.dataset.day) { b.classList.add("on"); }
        if (today === b.dataset.day) { b.classList.add("today"); }
        grid.appendChild(b);
      })(new Date(y, m, d));
    }
    pop.appendChild(grid);
    var foot = el("div", "date-foot");
    foot.appendChild(button("secondary date-today", W.today, null, function () { pick(input, new Date()); }));
    foot.appendChild(button("secondary date-clear", W.clear, null, function () { pick(input, null); }));
    pop.appendChild(foot);
  }
  function toggle(input, btn) {
    var was = open && open.input === input;
    close();
    if (was) { return; }
    var pop = el("div", "date-pop");
    pop.setAttribute("role", "dialog");
    pop.setAttribute("aria-label", W.open);
    pop.addEventListener("click", function (ev) { ev.stopPropagation(); });
    var day = parse(input.value) || new Date();
    open = { input: input, btn: btn, pop: pop, month: new Date(day.getFullYear(), day.getMonth(), 1) };
    draw(open);
    btn.parentNode.insertBefore(pop, btn.nextSibling);
    btn.setAttribute("aria-expanded", "true");
  }
  document.querySelectorAll("input[data-date]").forEach(function (input) {
    var wrap = el("span", "date-field");
    input.parentNode.insertBefore(wrap, input);
    wrap.appendChild(input);
    var btn = button("secondary date-open", "📅", W.open, function () { toggle(input, btn); });
    btn.setAttribute("aria-expanded", "false");
    wrap.appendChild(btn);
    input.addEventListener("input", function () { check(input); });
    input.addEventListener("keydown", function (ev) {
      if (ev.key === "ArrowDown" && ev.altKey) { ev.preventDefault(); toggle(input, btn); }
    });
    check(input);
  });
  // A click on the calendar's title or weekdays also reaches the field
  // through its <label>: that one keeps the calendar open.
  document.addEventListener("click", function (ev) { if (!open || ev.target !== open.input) { close(); } });
  document.addEventListener("keydown", function (ev) { if (ev.key === "Escape") { close(); } });
})();
