"""Where commands run: this machine, the bubblewrap sandbox, another machine over ssh."""
