// The labelling page, fast from the keyboard alone. No inline scripts (CSP): this file reads
// the form's data attributes. Keys: 1–9 pick a value in the highlighted row and move down,
// 0 clears it, ↑/↓ (or k/j) change row, s/f/u set the outcome, m focuses the failure mode,
// n the notes, r toggles "send to a reviewer", p plays/pauses the video, Enter submits (and
// the server opens the next episode), Esc skips (or leaves a text field).
(function () {
  "use strict";
  const form = document.querySelector("form[data-label-form]");
  if (!form || form.hasAttribute("data-readonly")) return;
  const rows = Array.from(form.querySelectorAll("[data-dim-row]"));
  const skipForm = document.querySelector("form[data-skip-form]");
  const mode = form.querySelector("[data-failure-mode]");
  const seconds = form.querySelector("[data-seconds]");
  const started = performance.now();
  let active = 0;
  let sent = false;

  function setActive(i) {
    if (!rows.length) return;
    active = Math.max(0, Math.min(rows.length - 1, i));
    rows.forEach(function (row, j) { row.classList.toggle("active", j === active); });
    rows[active].scrollIntoView({ block: "nearest" });
  }

  function pick(n) {
    const row = rows[active];
    if (!row) return;
    const radios = row.querySelectorAll("input[type=radio]");
    if (n < radios.length) {
      radios[n].checked = true;
      radios[n].dispatchEvent(new Event("change", { bubbles: true }));
      if (active < rows.length - 1) setActive(active + 1);
    }
  }

  function outcome(value) {
    const radio = form.querySelector('input[name="outcome"][value="' + value + '"]');
    if (radio) { radio.checked = true; sync(); }
  }

  function sync() {
    const checked = form.querySelector('input[name="outcome"]:checked');
    const failure = checked && checked.value === "failure";
    if (mode) {
      mode.disabled = !failure;
      if (!failure) mode.value = "";
    }
  }

  function submit() {
    if (sent) return;
    sent = true;
    form.requestSubmit();
  }

  form.addEventListener("submit", function () {
    if (seconds) seconds.value = ((performance.now() - started) / 1000).toFixed(1);
    sent = true;
  });
  form.addEventListener("change", function (event) {
    if (event.target.name === "outcome") sync();
  });
  rows.forEach(function (row, i) {
    row.addEventListener("click", function () { setActive(i); });
  });

  document.addEventListener("keydown", function (event) {
    const target = event.target;
    const typing = target instanceof HTMLElement && target.matches("textarea, input[type=text], select");
    if (event.key === "Escape") {
      event.preventDefault();
      if (typing) { target.blur(); return; }
      if (skipForm && !sent) { sent = true; skipForm.requestSubmit(); }
      return;
    }
    if (typing) {
      const submitKey = event.key === "Enter" && (target.tagName === "SELECT" || event.ctrlKey || event.metaKey);
      if (submitKey) { event.preventDefault(); submit(); }
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const key = event.key;
    let handled = true;
    if (/^[0-9]$/.test(key)) pick(Number(key));
    else if (key === "ArrowDown" || key === "j") setActive(active + 1);
    else if (key === "ArrowUp" || key === "k") setActive(active - 1);
    else if (key === "s") outcome("success");
    else if (key === "f") outcome("failure");
    else if (key === "u") outcome("unknown");
    else if (key === "m" && mode) { outcome("failure"); mode.focus(); }
    else if (key === "n") form.querySelector("textarea[name=notes]").focus();
    else if (key === "r") { const flag = form.querySelector("input[name=flagged]"); flag.checked = !flag.checked; }
    else if (key === "p") {
      const video = document.querySelector("video[data-label-video]");
      if (video) { if (video.paused) video.play(); else video.pause(); }
    }
    else if (key === "Enter") submit();
    else handled = false;
    if (handled) event.preventDefault();
  });

  sync();
  setActive(0);
  form.dataset.keys = "ready";
})();
