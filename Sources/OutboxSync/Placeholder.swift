// Module under construction; replaced as it lands.
