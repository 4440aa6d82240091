"""SQL front end: parsing, construct checks, plan nodes, lowering, rewrite rules, incrementalization."""
