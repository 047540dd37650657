// Mark every figure of the page once it has loaded (data-loaded="yes", or "no" for a broken
// image): the documentation tests read it from the page as the browser rendered it.
window.addEventListener("load", () => {
  document.querySelectorAll("article img").forEach((img) => {
    img.dataset.loaded = img.complete && img.naturalWidth > 0 ? "yes" : "no";
  });
});
