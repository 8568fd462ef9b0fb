// Every figure of a page links to its full-size image. On a phone a figure keeps its natural size
// and scrolls sideways inside that link (wide-code.css), under a line that says so when it is wider
// than the screen; a tap opens the image whole. tools/browser_test.py checks that every figure of
// the book has this link.
document.addEventListener("DOMContentLoaded", () => {
  const hints = [];
  for (const img of document.querySelectorAll("article img")) {
    if (img.closest("a") || !img.closest("figure, .cell_output")) continue;
    const link = document.createElement("a");
    link.href = img.getAttribute("src");
    link.target = "_blank";
    link.rel = "noopener";
    link.className = "tt-full-size";
    link.title = "Open the figure at full size";
    const hint = document.createElement("p");
    hint.className = "tt-scroll-hint";
    hint.hidden = true;
    hint.textContent = "Wider than the screen: scroll the figure sideways, or tap it to open it whole.";
    img.replaceWith(link);
    link.appendChild(img);
    link.before(hint);
    hints.push([link, hint]);
  }
  const update = () => {
    for (const [link, hint] of hints) hint.hidden = !(link.scrollWidth > link.clientWidth + 1);
  };
  window.addEventListener("load", update);
  window.addEventListener("resize", update);
});
