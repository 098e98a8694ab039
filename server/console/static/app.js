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
    document.getElementById("confirm-reason").value = "";
    dialog.showModal();
  });
  if (dialog) {
    dialog.addEventListener("close", function () {
      if (dialog.returnValue === "ok" && pending) {
        var reason = pending.querySelector("input[name=reason]");
        if (reason) {
          reason.value = document.getElementById("confirm-reason").value;
        }
        pending.dataset.confirmed = "1";
        pending.submit();
      }
      pending = null;
    });
  }
})();
