// The planner's world forms: "Add a row" appends a blank row to a list (cameras, access
// windows, condition values ...) from the formset's empty row, as Django numbers them.
(function () {
  "use strict";

  function bind(box) {
    const prefix = box.dataset.formset;
    const total = box.querySelector('input[name="' + prefix + '-TOTAL_FORMS"]');
    const template = box.querySelector("template");
    const body = box.querySelector("tbody");
    const button = box.querySelector("[data-add-row]");
    if (!total || !template || !body || !button) return;
    button.addEventListener("click", function () {
      const index = parseInt(total.value, 10) || 0;
      body.insertAdjacentHTML("beforeend", template.innerHTML.replace(/__prefix__/g, String(index)));
      total.value = String(index + 1);
      const first = body.lastElementChild && body.lastElementChild.querySelector("input, select");
      if (first) first.focus();
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-formset]").forEach(bind);
  });
})();
