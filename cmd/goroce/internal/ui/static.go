package ui

import "embed"

// staticFiles holds the page: index.html, its script app.js and its style
// sheet style.css, served under /static/ (index.html also as /).
//
//go:embed static
var staticFiles embed.FS
