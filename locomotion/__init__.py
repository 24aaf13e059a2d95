"""MuJoCo locomotion (the paper's other half): gymnasium's ``-v5`` tasks trained by ES with
linear or MLP policies on normalized observations. A plug-in, as ``pong`` is: the core never
imports it by name (entry point ``es.plugins: locomotion``)."""
