/* Placeholder: filled in by its module owner. */
#include "config.h"

#include <stdio.h>

#include "cmd.h"

int cmd_bench(int argc, char **argv)
{
	fprintf(stderr, "wharf bench: not implemented yet\n");
	return 1;
}
