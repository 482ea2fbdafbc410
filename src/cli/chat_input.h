// chat_input.h — what `specdec chat` reads from its user: a message a line, or several lines as one message.
//
// On a terminal, lines are read through libedit (line editing, history) with the terminal's bracketed paste mode
// on (xterm's control sequences: CSI ? 2004 h asks the terminal to wrap what is pasted in ESC [200~ … ESC [201~):
// a pasted block, newlines and all, is inserted into the line being edited, and Enter sends it as one message.
// Anywhere, a line """ opens a message of several lines and the next such line closes it. Ctrl-C while a line is
// read drops it.
#ifndef SPECDEC_CLI_CHAT_INPUT_H
#define SPECDEC_CLI_CHAT_INPUT_H

#include <stdbool.h>

// Sets libedit up for chat_read_message: its key reader (UTF-8 characters, pastes) and UTF-8 for its characters.
// `terminal`: standard input is a terminal.
void chat_input_start(bool terminal);

// The next message (malloc'd), NULL at the end of input (Ctrl-D, or the end of the file); "" after a Ctrl-C.
// `terminal`: standard input is a terminal (libedit, pastes), otherwise plain lines.
char *chat_read_message(bool terminal);

#endif
