"""Training ML policies for the mlbridge passes (see :mod:`mlbridge.train.inliner`)."""
