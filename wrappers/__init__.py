"""The unified multi-turn wrapper and action parsers (installed as `agentgym_wrappers`)."""

from agentgym_wrappers.multiturn import MultiTurnWrapper
from agentgym_wrappers.parsers import PARSERS, REPLIES, ParseError, action_reply, first_of, get_parser, register_parser

__all__ = [
    "PARSERS",
    "REPLIES",
    "MultiTurnWrapper",
    "ParseError",
    "action_reply",
    "first_of",
    "get_parser",
    "register_parser",
]
