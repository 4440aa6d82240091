"""The plan IR the rules are written in, shared by both renderers: relations over weighted
rows and their closed expressions (:mod:`.rel`), the value types the in-process renderer
reasons with and Spark's typing rules for them (:mod:`.types`), and Spark's DECIMAL rules
(:mod:`.decimal_rules`)."""
