"""The bundled ticket-tracker MCP server: SQLite-backed, seeded, stdio and streamable HTTP."""
