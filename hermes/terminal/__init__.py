"""Process actors that kill whole trees, terminal sessions, background processes, guards."""
