"""Experiments of jaxlab.routing (NAME `routing_<module>`); their shared set-up lives in
private modules, one concept each (`_sources`, `_loader`, `_text_table`, `_features`,
`_committed`, `_tables`, `_haps`, `_vqa_setup`, `_compare`); the data build commands in
`_setup.py`."""
