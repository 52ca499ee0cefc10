"""SciWorld: ScienceWorld's 30 science task types on ScienceWorld's JVM simulator (`AgentGym/SciWorld-v0`).

The env module (and with it the JVM machinery) is imported by the registered entry point, not here.
"""
