// Mark every figure of the page once it has loaded (data-loaded="yes", or "no" for a broken
// image): the documentation tests read it from the page as the browser rendered it.
window.addEventListener("load", () => {
  document.querySelectorAll("article img").forEach((img) => {
    img.dataset.loaded = img.complete && img.naturalWidth > 0 ? "yes" : "no";
  });
});

// Mark each table of the contract page with whether it fits its column (data-fits) and
// whether its header row stays in view while the rows scroll (data-sticky): read by the tests.
window.addEventListener("load", () => {
  document.querySelectorAll("table.sp-contract").forEach((table) => {
    const column = table.parentElement.clientWidth;
    table.dataset.fits = table.scrollWidth <= column ? "yes" : "no";
    const th = table.querySelector("thead th");
    table.dataset.sticky = th ? getComputedStyle(th).position : "none";
  });
});
