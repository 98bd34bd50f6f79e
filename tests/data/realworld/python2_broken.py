import tensorflow as tf
print "this is Python 2" if
