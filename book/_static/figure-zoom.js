// Every figure of a page links to its full-size image. On a phone a figure shrinks to the width of
// the column and its labels become small; a tap opens the image whole. tools/browser_test.py checks
// that every figure of the book has this link.
document.addEventListener("DOMContentLoaded", () => {
  for (const img of document.querySelectorAll("article img")) {
    if (img.closest("a") || !img.closest("figure, .cell_output")) continue;
    const link = document.createElement("a");
    link.href = img.getAttribute("src");
    link.target = "_blank";
    link.rel = "noopener";
    link.className = "tt-full-size";
    link.title = "Open the figure at full size";
    img.replaceWith(link);
    link.appendChild(img);
  }
});
