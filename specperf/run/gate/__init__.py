"""The upgrade gate's two builds side by side, and how many engines a run keeps alive together on a
GPU.
"""
