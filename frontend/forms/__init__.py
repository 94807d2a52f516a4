"""Django forms of the pages (server-rendered, validated by the services they call)."""
