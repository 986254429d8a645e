// Builds into api/static, which FastAPI serves on the API's port (one origin, no CORS).
// `npm run dev` proxies /api to a running `elake serve` for hot reloading.
import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

export default defineConfig({
  plugins: [react()],
  build: { outDir: "../api/static", emptyOutDir: true },
  server: { proxy: { "/api": "http://127.0.0.1:8799" } },
});
