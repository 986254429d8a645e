// Starts Swagger UI on this server's OpenAPI document. A file rather than an inline script,
// so the Content-Security-Policy can forbid inline scripts on every page.

// An operation's path is drawn inside the button that opens it; Swagger UI makes the path a
// link too, a control nested in a control (screen readers and keyboards trip on it). Drawn as
// text instead, through Swagger UI's own component registry; deep linking is unchanged (the
// address follows the operation opened, and an address with one opens it).
const OperationPathAsText = (system) => ({
  components: { DeepLink: ({ text }) => system.React.createElement("span", null, text) },
});

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
  plugins: [OperationPathAsText],
});

// What Swagger UI leaves unnamed or out of keyboard reach, named and reachable as it renders:
// a parameter's "Try it out" controls take the parameter's name (the enum and boolean
// selects have none), the request body's text box is named, and a code block that scrolls
// can be focused, so its overflow scrolls from the keyboard.
function completeAccessibility(root) {
  for (const row of root.querySelectorAll("tr[data-param-name]")) {
    const name = `${row.dataset.paramName} (${row.dataset.paramIn} parameter)`;
    for (const control of row.querySelectorAll("select, input, textarea")) {
      if (!control.hasAttribute("aria-label") && !control.labels?.length) control.setAttribute("aria-label", name);
    }
  }
  for (const body of root.querySelectorAll("textarea.body-param__text:not([aria-label])")) {
    body.setAttribute("aria-label", "Request body");
  }
  for (const code of root.querySelectorAll("pre.microlight:not([tabindex])")) code.tabIndex = 0;
}
const docsRoot = document.getElementById("swagger-ui");
new MutationObserver(() => completeAccessibility(docsRoot)).observe(docsRoot, { childList: true, subtree: true });
