// serve.h — specdec serve: the command that loads the models and runs the server of src/serve/ until SIGINT or
// SIGTERM.
#ifndef SPECDEC_CLI_SERVE_H
#define SPECDEC_CLI_SERVE_H

#include "cli/args.h"

int cmd_serve(const Args *args, Err *err);

#endif
