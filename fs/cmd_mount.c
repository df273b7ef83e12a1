/* Placeholder: filled in by its module owner. */
#include "config.h"

#include <stdio.h>

#include "cmd.h"

int cmd_mount(int argc, char **argv)
{
	fprintf(stderr, "wharf mount: not implemented yet\n");
	return 1;
}

int cmd_umount(int argc, char **argv)
{
	fprintf(stderr, "wharf umount: not implemented yet\n");
	return 1;
}
