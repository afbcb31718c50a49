// `ingot`: the command-line tool (tools/cli.cpp holds the commands).
#include "cli.h"

int main(int argc, char** argv) { return ingot::cli::ingot_main(argc, argv); }
