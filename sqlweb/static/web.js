// Refreshes the holds without reloading the page: fetches the fragment
// the server renders and swaps it in. The server escapes every value.
(function () {
  "use strict";
  var box = document.getElementById("live");
  if (!box) { return; }
  var every = parseInt(box.getAttribute("data-every"), 10) || 2000;
  var status = document.getElementById("status");
  var n = 0;
  function tick() {
    // A tab in the background costs the database nothing.
    if (document.hidden) { setTimeout(tick, every); return; }
    fetch("fragment", { cache: "no-store", credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        return r.text();
      })
      .then(function (html) {
        box.innerHTML = html;
        n++;
        box.setAttribute("data-refreshes", String(n));
        if (status) { status.textContent = ""; }
      })
      .catch(function (e) {
        if (status) { status.textContent = "refresh failed: " + e.message; }
      })
      .then(function () { setTimeout(tick, every); });
  }
  setTimeout(tick, every);
})();
