// The local console's only script: the Create flow's steps, the live cost estimate, and a
// running job's logs and state. Without it every step is open and pages refresh themselves.
(function () {
  "use strict";

  function stepper(form) {
    var steps = Array.prototype.slice.call(form.querySelectorAll(".step"));
    if (form.getAttribute("data-has-errors") === "true") return; // show every field with its message
    form.classList.add("stepper");
    function open(i) {
      steps.forEach(function (s, j) { s.classList.toggle("open", j === i); });
      steps[i].scrollIntoView({ block: "nearest" });
    }
    steps.forEach(function (step, i) {
      step.querySelector("h2").addEventListener("click", function () { open(i); });
      var next = step.querySelector("button.continue");
      if (next) next.addEventListener("click", function () { open(Math.min(i + 1, steps.length - 1)); });
    });
    open(0);
  }

  function estimate(form) {
    var url = form.getAttribute("data-estimate"), timer = null;
    var out = document.getElementById("cost-estimate"), err = document.getElementById("cost-error");
    function refresh() {
      var body = new URLSearchParams(new FormData(form));
      fetch(url, { method: "POST", body: body }).then(function (r) { return r.json(); }).then(function (a) {
        out.textContent = a.estimate; err.textContent = a.error; err.hidden = !a.error;
      });
    }
    form.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(refresh, 300); });
  }

  function follow(head) {
    if (head.dataset.terminal === "true") return;
    var url = head.dataset.statusUrl, state = head.dataset.state;
    function tick() {
      fetch(url).then(function (r) { return r.json(); }).then(function (a) {
        if (a.state !== state || !document.querySelector("section.replica") && Object.keys(a.logs || {}).length) {
          window.location.reload(); return;
        }
        Object.keys(a.logs || {}).forEach(function (role) {
          var pre = document.getElementById("log-" + role);
          if (pre && pre.textContent !== a.logs[role]) { pre.textContent = a.logs[role]; pre.scrollTop = pre.scrollHeight; }
        });
        var d = document.getElementById("duration"); if (d) d.textContent = a.duration;
        if (!a.terminal) setTimeout(tick, 1500);
      }).catch(function () { setTimeout(tick, 3000); });
    }
    setTimeout(tick, 1500);
  }

  document.addEventListener("DOMContentLoaded", function () {
    var form = document.getElementById("create-form");
    if (form) { stepper(form); estimate(form); }
    var head = document.getElementById("job");
    if (head) follow(head);
  });
})();
