"""Control: the action grammar, the text-command parser, the executor and the turn model."""
