"""Compiling views and running refresh epochs: change capture, operators, output, oracle."""
