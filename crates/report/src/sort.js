// Sortable tables: click (or Enter on) a header to sort by that column; click again to reverse.
// Numeric cells carry their raw value in data-v; numbers sort descending first, text ascending.
(function () {
  "use strict";
  function key(row, i, numeric) {
    var cell = row.cells[i];
    if (!cell) return numeric ? -Infinity : "";
    var v = cell.getAttribute("data-v");
    if (numeric) return v === null ? -Infinity : parseFloat(v);
    return (v === null ? cell.textContent : v).toLowerCase();
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, i) {
      th.tabIndex = 0;
      th.title = "sort by this column";
      function sort() {
        var numeric = th.classList.contains("num");
        var current = th.getAttribute("aria-sort");
        var ascending = current ? current === "descending" : !numeric;
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = key(a, i, numeric), y = key(b, i, numeric);
          var c = x < y ? -1 : x > y ? 1 : 0;
          return ascending ? c : -c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      }
      th.addEventListener("click", sort);
      th.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sort(); }
      });
    });
  });
})();
