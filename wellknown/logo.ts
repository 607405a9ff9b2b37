// The logo the plugin manifest's logo_url points at: a small square SVG, served as is.
export const LOGO_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64" width="64" height="64" role="img" aria-label="Steward">' +
  '<rect width="64" height="64" rx="12" fill="#1f3a5f"/>' +
  '<path d="M20 40c2 4 7 6 12 6 7 0 12-3 12-9 0-12-22-7-22-16 0-3 3-5 8-5 4 0 7 1 9 4" fill="none" stroke="#fff" stroke-width="5" stroke-linecap="round"/>' +
  '</svg>\n'
