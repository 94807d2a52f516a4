// Fieldcraft page helpers. No inline scripts anywhere (CSP): pages carry data in
// <script type="application/json"> blocks and this file acts on them.
(function () {
  "use strict";

  function csrfToken() {
    const m = document.cookie.match(/(?:^|; )csrftoken=([^;]+)/);
    return m ? decodeURIComponent(m[1]) : "";
  }

  // htmx requests carry the CSRF token.
  document.addEventListener("htmx:configRequest", function (event) {
    event.detail.headers["X-CSRFToken"] = csrfToken();
  });

  // Render plotly figures whose JSON sits in a data block next to their container.
  function renderPlots(root) {
    if (!window.Plotly) return;
    root.querySelectorAll("[data-plot]").forEach(function (el) {
      if (el.dataset.rendered) return;
      const data = document.getElementById(el.dataset.plot);
      if (!data) return;
      const fig = JSON.parse(data.textContent);
      window.Plotly.newPlot(el, fig.data, fig.layout || {}, { responsive: true, displaylogo: false });
      el.dataset.rendered = "1";
    });
  }

  // Plots whose figure comes from a URL, re-fetched when their control form changes.
  function loadRemotePlot(el) {
    if (!window.Plotly) return;
    const form = document.querySelector('[data-target="' + el.id + '"]');
    const params = form ? new URLSearchParams(new FormData(form)).toString() : "";
    fetch(el.dataset.plotUrl + (params ? "?" + params : ""), { credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(function (fig) {
        window.Plotly.react(el, fig.data, fig.layout || {}, { responsive: true, displaylogo: false });
      });
  }

  // A heatmap of one dimension against itself fills only its diagonal: when rows and
  // columns meet, move the other select to another dimension (the server corrects it too).
  function keepAxesApart(form, changed) {
    const x = form.elements.namedItem("x");
    const y = form.elements.namedItem("y");
    if (!x || !y || x.value !== y.value || (changed !== x && changed !== y)) return;
    const other = changed === x ? y : x;
    const pick = Array.from(other.options).find(function (o) { return o.value !== changed.value; });
    if (pick) other.value = pick.value;
  }

  function initRemotePlots(root) {
    root.querySelectorAll("[data-plot-url]").forEach(function (el) {
      loadRemotePlot(el);
      const form = document.querySelector('[data-target="' + el.id + '"]');
      if (form && !form.dataset.bound) {
        form.addEventListener("change", function (event) { keepAxesApart(form, event.target); loadRemotePlot(el); });
        form.dataset.bound = "1";
      }
    });
  }

  document.addEventListener("DOMContentLoaded", function () { renderPlots(document); initRemotePlots(document); });
  document.addEventListener("htmx:afterSettle", function (event) { renderPlots(event.target); });
  window.Fieldcraft = { csrfToken: csrfToken, renderPlots: renderPlots };
})();
