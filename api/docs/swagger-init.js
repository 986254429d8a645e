// Starts Swagger UI on this server's OpenAPI document. A file rather than an inline script,
// so the Content-Security-Policy can forbid inline scripts on every page.
window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  // the default validator badge is an image from a third-party site
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis],
});
