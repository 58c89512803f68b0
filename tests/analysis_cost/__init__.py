"""How runs' cost is shown: report, compare and view (DESIGN section 15)."""
