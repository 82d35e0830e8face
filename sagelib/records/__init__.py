"""The records that keep the research honest: the experiment log and its view, the reference inventory,
environment capture, prior work and reopening rules, result documents, a notebook's results.json."""
