"""Parsing .pt source: the Lark grammar, its newline post-lexer and the AST builder."""
from .parse import parse, decode_source

__all__ = ["parse", "decode_source"]
