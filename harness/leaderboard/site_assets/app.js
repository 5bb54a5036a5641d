/* harness site: the router, loaded last (every view's script has added its view to window.harnessSite). */
(function (site) {
"use strict";

var failure = site.failure, viewTable = site.viewTable, viewCompare = site.viewCompare, viewCurves = site.viewCurves,
  viewExamples = site.viewExamples, viewIndex = site.viewIndex;

/* ---------------------------------------------------------------- routing */
function route() {
  var parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  var done;
  if (parts[0] === "table" && parts[1]) { done = viewTable(parts[1]); }
  else if (parts[0] === "compare" && parts.length === 4) { done = viewCompare(parts[1], Number(parts[2]), Number(parts[3])); }
  else if (parts[0] === "curves" && parts.length === 3) { done = viewCurves(parts[1], Number(parts[2])); }
  else if (parts[0] === "examples" && parts.length === 5) {
    done = viewExamples(parts[1], Number(parts[2]), Number(parts[3]), Number(parts[4]));
  } else { done = viewIndex(); }
  done.catch(failure).then(function () { document.body.setAttribute("data-view", parts[0] || "index"); });
}

site.route = route;
window.addEventListener("hashchange", function () { document.body.removeAttribute("data-view"); route(); });
route();
}(window.harnessSite));
