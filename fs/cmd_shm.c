/* Placeholder: filled in by its module owner. */
#include "config.h"

#include <stdio.h>

#include "cmd.h"

int cmd_shm(int argc, char **argv)
{
	fprintf(stderr, "wharf shm: not implemented yet\n");
	return 1;
}
