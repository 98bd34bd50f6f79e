"""The program model: what a training program is made of, found by dataflow
across local names, helper functions and the sibling modules of its project.

Analysis only (the rules decide what to rewrite): ``project`` indexes the
modules beside a file, ``tracing`` follows a name to the expressions that
define it wherever they are built."""
