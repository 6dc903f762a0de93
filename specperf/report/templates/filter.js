(function () {
  "use strict";
  var form = document.getElementById("filters");
  if (!form) { return; }
  var keys = ["model", "method", "dataset", "status"];
  function apply() {
    var want = {};
    keys.forEach(function (key) { want[key] = form.elements[key].value; });
    var shown = 0;
    document.querySelectorAll("[data-filterable]").forEach(function (el) {
      var match = keys.every(function (key) { return !want[key] || el.dataset[key] === want[key]; });
      el.hidden = !match;
      if (match && el.tagName === "TR") { shown += 1; }
    });
    document.getElementById("filter-count").textContent = shown + " scenarios shown";
  }
  form.addEventListener("change", apply);
  form.addEventListener("reset", function () { window.setTimeout(apply, 0); });
  form.hidden = false;
  apply();
})();
