// A source the agent may have meant to build, under a name the build never uses.
int unused = 0;
