"""Running the user's model code: sandboxed, in its own namespace, with torch and the process put back after it."""
