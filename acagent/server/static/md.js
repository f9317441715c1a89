"use strict";
// A small markdown renderer for model answers that builds DOM nodes and never uses innerHTML:
// untrusted text only ever reaches the page through textContent / createTextNode, so no markup
// in an answer can run or inject anything (a vendored general renderer would need a sanitizer
// on its HTML output, and a CDN is not allowed by the page's CSP). It covers what models write:
// fenced code blocks (with a Copy button), headings, bullet and numbered lists, block quotes,
// paragraphs, `code`, **bold**, *italic* / _italic_ and [links](https://…) (http/https only).
(function () {
  const INLINE = /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([^*\n]+)\*\*|__([^_\n]+)__|\*([^*\n]+)\*|\b_([^_\n]+)_\b|\[([^\]\n]+)\]\(([^)\s]+)\)/g;

  function inline(parent, text) {
    let last = 0;
    for (const m of text.matchAll(INLINE)) {
      if (m.index > last) parent.append(document.createTextNode(text.slice(last, m.index)));
      if (m[2] !== undefined) { const c = document.createElement("code"); c.textContent = m[2]; parent.append(c); }
      else if (m[3] !== undefined || m[4] !== undefined) {
        const b = document.createElement("strong"); inline(b, m[3] !== undefined ? m[3] : m[4]); parent.append(b);
      } else if (m[5] !== undefined || m[6] !== undefined) {
        const i = document.createElement("em"); inline(i, m[5] !== undefined ? m[5] : m[6]); parent.append(i);
      } else {
        const url = m[8];
        if (/^https?:\/\//i.test(url)) {
          const a = document.createElement("a");
          a.href = url; a.rel = "noopener noreferrer"; a.target = "_blank"; a.textContent = m[7];
          parent.append(a);
        } else parent.append(document.createTextNode(m[0]));
      }
      last = m.index + m[0].length;
    }
    if (last < text.length) parent.append(document.createTextNode(text.slice(last)));
    return parent;
  }

  function codeBlock(lang, lines) {
    const wrap = document.createElement("div"); wrap.className = "codeblock";
    const pre = document.createElement("pre"), code = document.createElement("code");
    if (lang) code.className = "language-" + lang.replace(/[^\w-]/g, "");
    code.textContent = lines.join("\n");
    pre.append(code);
    const copy = document.createElement("button");
    copy.type = "button"; copy.className = "copy"; copy.textContent = "Copy";
    copy.addEventListener("click", async () => {
      try { await navigator.clipboard.writeText(code.textContent); copy.textContent = "Copied"; }
      catch (_) { copy.textContent = "Select and copy"; }
      setTimeout(() => { copy.textContent = "Copy"; }, 1500);
    });
    wrap.append(copy, pre);
    return wrap;
  }

  function render(text) {
    const out = document.createDocumentFragment();
    const lines = String(text).split("\n");
    let para = null, list = null, quote = null;
    const close = () => { para = null; list = null; quote = null; };
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i];
      const fence = line.match(/^\s*(```+|~~~+)\s*([\w+-]*)\s*$/);
      if (fence) {
        const body = [];
        i++;
        while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
        out.append(codeBlock(fence[2], body));   // an unclosed fence (still streaming) runs to the end
        close(); continue;
      }
      if (!line.trim()) { close(); continue; }
      const h = line.match(/^(#{1,6})\s+(.*)$/);
      if (h) { out.append(inline(document.createElement("h" + Math.min(6, h[1].length + 2)), h[2])); close(); continue; }
      const li = line.match(/^\s*([-*+]|\d+[.)])\s+(.*)$/);
      if (li) {
        const tag = /\d/.test(li[1]) ? "ol" : "ul";
        if (!list || list.tagName.toLowerCase() !== tag) { list = document.createElement(tag); out.append(list); }
        list.append(inline(document.createElement("li"), li[2]));
        para = null; quote = null; continue;
      }
      const q = line.match(/^>\s?(.*)$/);
      if (q) {
        if (!quote) { quote = document.createElement("blockquote"); out.append(quote); }
        else quote.append(document.createElement("br"));
        inline(quote, q[1]); para = null; list = null; continue;
      }
      if (!para) { para = document.createElement("p"); out.append(para); list = null; quote = null; }
      else para.append(document.createTextNode("\n"));
      inline(para, line);
    }
    return out;
  }

  window.acagentMd = render;
})();
