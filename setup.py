"""Installs every command in bin/ (metadata lives in setup.cfg)."""
import glob

from setuptools import setup

setup(scripts=sorted(glob.glob("bin/*")))
