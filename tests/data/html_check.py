#!/usr/bin/env python3
"""Read an HTML page as a browser parses it (html5lib, the HTML standard's parsing algorithm):
`html_check.py PAGE` prints one JSON object: the parse errors, every element's name, the
attributes a page could act or load through, the links, and the body's text. Stdlib and
html5lib only (tests/report_html.rs)."""

import json
import sys

import html5lib

# What loads or runs: HTML's elements, SVG's (image, use, foreignObject), and a stylesheet
# (the page's one is in its head; one in the body is not the page's).
ACTIVE = {
    "script", "iframe", "object", "embed", "img", "link", "base", "form", "meta",
    "image", "use", "foreignObject", "audio", "video", "source", "track", "frame",
}

with open(sys.argv[1], "rb") as f:
    data = f.read()
parser = html5lib.HTMLParser(tree=html5lib.getTreeBuilder("etree"), namespaceHTMLElements=False)
document = parser.parse(data)
errors = [
    f"line {line} col {col}: {code} {json.dumps(datavars, default=str)}"
    for (line, col), code, datavars in parser.errors
]
elements = []
acting = []
links = []
statuses = []
csp = [
    m.get("content")
    for m in document.iter("meta")
    if (m.get("http-equiv") or "").lower() == "content-security-policy"
]
body = document.find("body")
for element in document.iter():
    if not isinstance(element.tag, str):
        continue  # a comment
    name = element.tag.split("}")[-1]
    elements.append(name)
    for attribute, value in element.attrib.items():
        attribute = attribute.split("}")[-1]
        if attribute.lower().startswith("on") or attribute.lower() in ("src", "srcdoc", "action"):
            acting.append(f"{name}@{attribute}={value}")
        if attribute == "style" and "url(" in value.replace(" ", "").lower():
            acting.append(f"{name}@style={value}")
        if attribute == "href":
            links.append(value)
    classes = (element.get("class") or "").split()
    if name == "td" and "status" in classes:
        statuses.append([" ".join(classes), "".join(element.itertext())])
if body is not None:
    acting.extend(f"style in the body: {''.join(s.itertext())[:80]}" for s in body.iter("style"))
print(
    json.dumps(
        {
            "errors": errors,
            "elements": elements,
            "active": [e for e in elements if e in ACTIVE],
            "acting": acting,
            "links": links,
            "statuses": statuses,
            "csp": csp,
            "title": "".join(document.find("head/title").itertext()) if document.find("head/title") is not None else None,
            "text": "".join(body.itertext()) if body is not None else "",
        }
    )
)
