"""Sphinx configuration for the nwensemble documentation."""

import os
import sys
import warnings

sys.path.insert(0, os.path.abspath(".."))

import nwensemble  # noqa: E402

project = "nwensemble"
author = "The nwensemble developers"
copyright = "2026, The nwensemble developers"
version = release = nwensemble.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "generated/*.examples", "sg_execution_times.rst"]
autosummary_generate = True
autodoc_default_options = {"inherited-members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

intersphinx_mapping = {}  # CI has no network: no remote inventories.

html_theme = "pydata_sphinx_theme"
html_title = "nwensemble"
html_theme_options = {"navigation_with_keys": False}
html_static_path = []

sphinx_gallery_conf = {
    "examples_dirs": ["../examples"],
    "gallery_dirs": ["auto_examples"],
    "filename_pattern": r"/plot_",
    "backreferences_dir": "generated",
    "doc_module": ("nwensemble",),
    "reference_url": {"nwensemble": None},
    "download_all_examples": False,
    "show_memory": False,
    "remove_config_comments": True,
}

warnings.filterwarnings(
    "ignore", category=UserWarning, message="Matplotlib is currently"
)
