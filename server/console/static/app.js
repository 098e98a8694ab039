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
