"""The protocols an env server speaks besides its own: AgentGym's routes (`agentgym/`) and OpenEnv's (`openenv`)."""
